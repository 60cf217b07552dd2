// SPDX-License-Identifier: MIT
/* Ctrl-C and SIGTERM: one message, a clean line, exit status 130. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "interrupt.h"

static char message[1024];
static size_t message_len;
static const volatile bool *progress_line;

/*
 * Only async-signal-safe calls: write(2) and _exit(2). A build writes to
 * an unnamed temporary file (O_TMPFILE), which vanishes with the process,
 * so the destination is never touched.
 */
static void on_signal(int sig)
{
	(void)sig;
	if (progress_line && *progress_line)
		(void)!write(STDERR_FILENO, "\n", 1);
	(void)!write(STDERR_FILENO, message, message_len);
	_exit(CLI_EXIT_INTERRUPTED);
}

void cli_interrupt_install(const char *cmd, const char *left,
			   const volatile bool *line_open)
{
	struct sigaction sa;
	int n;

	n = snprintf(message, sizeof(message), "kiln %s: interrupted%s%s\n",
		     cmd, left ? "; " : "", left ? left : "");
	if (n < 0)
		n = 0;
	message_len = (size_t)n < sizeof(message) ? (size_t)n :
						    sizeof(message) - 1;
	if (message_len && message[message_len - 1] != '\n')
		message[message_len - 1] = '\n';
	progress_line = line_open;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}
