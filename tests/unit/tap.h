/* SPDX-License-Identifier: MIT */
/*
 * A tiny TAP producer for unit tests: TEST(name) { ... CHECK(cond); ... }
 * and a main() that runs the listed tests.
 *
 * SKIP("reason %s", ...) ends the running test as skipped: the TAP line is
 * "ok N - name # SKIP reason", which meson counts as a skip. With
 * KILN_REQUIRE_ALL=1 in the environment (as CI sets it) a skip is a
 * failure instead: "not ok N - name # required: reason".
 */
#ifndef KILN_TESTS_TAP_H
#define KILN_TESTS_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_failed_checks;
static bool tap_skipped;
static char tap_skip_reason[256];

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			printf("#   %s:%d: check failed: %s\n",	\
			       __FILE__, __LINE__, #cond);		\
			tap_failed_checks++;				\
		}							\
	} while (0)

#define CHECK_EQ(a, b)							\
	do {								\
		long long _a = (long long)(a), _b = (long long)(b);	\
		if (_a != _b) {						\
			printf("#   %s:%d: %s == %lld, expected %s == %lld\n", \
			       __FILE__, __LINE__, #a, _a, #b, _b);	\
			tap_failed_checks++;				\
		}							\
	} while (0)

#define TEST(name) static void name(void)

static inline bool tap_require_all(void)
{
	const char *v = getenv("KILN_REQUIRE_ALL");

	return v && strcmp(v, "1") == 0;
}

static inline void tap_skip(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static inline void tap_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tap_skip_reason, sizeof(tap_skip_reason), fmt, ap);
	va_end(ap);
	tap_skipped = true;
}

/* End the running test as skipped, with a printf-style reason. */
#define SKIP(...)							\
	do {								\
		tap_skip(__VA_ARGS__);					\
		return;							\
	} while (0)

/*
 * For main(): the whole program cannot run here. Returns the exit status
 * (0 for a TAP "1..0 # SKIP", 1 under KILN_REQUIRE_ALL=1).
 */
static inline int tap_skip_all(const char *reason)
{
	if (tap_require_all()) {
		printf("1..1\nnot ok 1 - all # required: %s\n", reason);
		return 1;
	}
	printf("1..0 # SKIP %s\n", reason);
	return 0;
}

struct tap_test {
	const char *name;
	void (*fn)(void);
};

#define TAP_ENTRY(name) { #name, name }

static inline int tap_run(const struct tap_test *tests, size_t n)
{
	int failed = 0;

	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		int before = tap_failed_checks;

		tap_skipped = false;
		tests[i].fn();
		if (tap_failed_checks != before) {
			printf("not ok %zu - %s\n", i + 1, tests[i].name);
			failed++;
		} else if (tap_skipped && tap_require_all()) {
			printf("not ok %zu - %s # required: %s\n", i + 1,
			       tests[i].name, tap_skip_reason);
			failed++;
		} else if (tap_skipped) {
			printf("ok %zu - %s # SKIP %s\n", i + 1, tests[i].name,
			       tap_skip_reason);
		} else {
			printf("ok %zu - %s\n", i + 1, tests[i].name);
		}
	}
	return failed ? 1 : 0;
}

#define TAP_MAIN(...)							\
	int main(void)							\
	{								\
		static const struct tap_test tests[] = { __VA_ARGS__ };	\
		return tap_run(tests, sizeof(tests) / sizeof(tests[0])); \
	}

#endif
