/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* counted_main.c - spoke-bench-counted's main (counted.c has the tool). */
#include "counted.h"

int main(int argc, char **argv)
{
	return counted_main(argc, argv);
}
