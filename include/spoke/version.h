/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * spoke/version.h - the version of the spoke headers, for compile-time checks.
 * Included by spoke/spoke.h and spoke/engine.h. spoke_version() (spoke.h)
 * gives the version of the library actually loaded, as
 * "MAJOR.MINOR.PATCH", the string `pkg-config --modversion spoke` prints.
 *
 * These three lines are the one place the version is written: CMakeLists.txt
 * reads them for project(VERSION), hence the soname, spoke.pc and the CMake
 * package version. Before 1.0 a new minor version may change the ABI.
 */
#ifndef SPOKE_VERSION_H
#define SPOKE_VERSION_H

#define SPOKE_VERSION_MAJOR 0
#define SPOKE_VERSION_MINOR 4
#define SPOKE_VERSION_PATCH 0

#endif /* SPOKE_VERSION_H */
