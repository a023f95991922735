/* SPDX-License-Identifier: MIT */
/* File: uraid/export.h
 *
 * URAID_EXPORT marks what libraid's shared library (liburaid.so) exports:
 * the classes and functions of the public headers that embedders call.
 * libraid is compiled with -fvisibility=hidden and
 * -fvisibility-inlines-hidden, so everything else (ArrayImpl, the stripe
 * cache, the planner, the member backends' classes, ...) stays out of the
 * dynamic symbol table: embedders cannot come to depend on it, and the
 * dynamic linker has fewer symbols to resolve.
 *
 * On a class it exports every out-of-line member function, the static
 * data, and the vtable and typeinfo; classes that embedders subclass
 * (Member) or catch, compare or dynamic_cast across the library boundary
 * must carry it on the class, not only on their functions.
 *
 * The same objects make the static library (liburaid.a) and liburaid.so,
 * so the macro is the same whether the library is being built or used;
 * in a static link, visibility only decides what a shared object built
 * from it (the nbdkit plugin) exports, which for libraid's hidden symbols
 * is nothing. C and C++ (uraid/uraid.h is a C header).
 */

#ifndef URAID_EXPORT_H_
#define URAID_EXPORT_H_

/* URAID_NO_EXPORT keeps one member of an exported class out of the table:
 * a private constructor that names an internal type (Array's, taking the
 * ArrayImpl only the library can make) would otherwise put that type's
 * name among the exports. */

#if defined(__GNUC__) || defined(__clang__)
#define URAID_EXPORT __attribute__((visibility("default")))
#define URAID_NO_EXPORT __attribute__((visibility("hidden")))
#else
#define URAID_EXPORT
#define URAID_NO_EXPORT
#endif

#endif /* URAID_EXPORT_H_ */
