// SPDX-License-Identifier: MIT
/* kiln: the command table. */
#include <stdio.h>
#include <kiln/kiln.h>

int main(void)
{
	printf("kiln %s\n", kiln_version());
	return 0;
}
