/* SPDX-License-Identifier: MIT */
/*
 * Ctrl-C (SIGINT) and SIGTERM during a long command: end the progress line,
 * say what was interrupted and what it left, exit 130.
 */
#ifndef KILN_CLI_INTERRUPT_H
#define KILN_CLI_INTERRUPT_H

#include <stdbool.h>

/* Exit status after an interrupt, as shells give 128 + SIGINT. */
#define CLI_EXIT_INTERRUPTED 130

/*
 * From now on SIGINT and SIGTERM print "\n" when @line_open (a progress
 * line may be on stderr), then "kiln: @cmd: interrupted[; @left]", and end
 * the process with CLI_EXIT_INTERRUPTED. The message is formatted here,
 * once (@cmd and @left are copied); @left may be NULL. @line_open must
 * outlive the command; NULL: no progress line.
 */
void cli_interrupt_install(const char *cmd, const char *left,
			   const volatile bool *line_open);

#endif
