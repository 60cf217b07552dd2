/* SPDX-License-Identifier: MIT */
/*
 * A tiny TAP producer for unit tests: TEST(name) { ... CHECK(cond); ... }
 * and a main() that runs the listed tests.
 */
#ifndef KILN_TESTS_TAP_H
#define KILN_TESTS_TAP_H

#include <stdio.h>
#include <stdlib.h>

static int tap_failed_checks;

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

		tests[i].fn();
		if (tap_failed_checks != before) {
			printf("not ok %zu - %s\n", i + 1, tests[i].name);
			failed++;
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
