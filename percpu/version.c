/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * version.c - spoke_version(): the version this library was built as, from
 * the same macros as the headers (spoke/version.h).
 */
#include <spoke/spoke.h>

#define SPOKE_STR_(x) #x
#define SPOKE_STR(x)  SPOKE_STR_(x)

const char *spoke_version(void)
{
	static const char v[] = SPOKE_STR(SPOKE_VERSION_MAJOR) "." SPOKE_STR(
		SPOKE_VERSION_MINOR) "." SPOKE_STR(SPOKE_VERSION_PATCH);

	return v;
}
