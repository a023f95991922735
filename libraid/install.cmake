# SPDX-License-Identifier: MIT
# Packaging of libraid (issue 9): a shared library beside the static one,
# and the install rules for the headers, a CMake package and a pkg-config
# file. libraid/CMakeLists.txt runs this file with cmake_language(DEFER) at
# the end of its directory, so it sees raid's final sources and link
# interface whatever is added to that file later.
#
#   raid         liburaid.a   what the plugin, the tool and the tests link
#                             (alias uraid::raid inside this build)
#   raid_shared  liburaid.so  the same objects (built PIC), for embedders
#
# Installed, find_package(uraid) gives uraid::raid (liburaid.so) and
# uraid::raid_static (liburaid.a, whose link interface carries raid's
# private dependencies: ISA-L, threads, ...); pkg-config gives `uraid` with
# the private ones in Requires.private/Libs.private for `pkg-config
# --static`. A private dependency is mapped to its pkg-config module
# generically (PkgConfig::<P> -> <P>_MODULE_NAME), so adding one to raid
# needs no change here.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# raid's link interface: public dependencies (Abseil: the headers use it)
# and $<LINK_ONLY:...> private ones (what static consumers must also link).
get_target_property(_uraid_iface raid INTERFACE_LINK_LIBRARIES)
set(_uraid_public)
set(_uraid_private)
foreach(_dep IN LISTS _uraid_iface)
  if(_dep MATCHES "^\\$<LINK_ONLY:(.+)>$")
    list(APPEND _uraid_private "${CMAKE_MATCH_1}")
  elseif(_dep)
    list(APPEND _uraid_public "${_dep}")
  endif()
endforeach()

set_target_properties(raid PROPERTIES OUTPUT_NAME uraid
                                      EXPORT_NAME raid_static)
add_library(raid_shared SHARED $<TARGET_OBJECTS:raid>)
target_include_directories(raid_shared PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${CMAKE_CURRENT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(raid_shared PUBLIC ${_uraid_public}
                                  PRIVATE ${_uraid_private})
set_target_properties(raid_shared PROPERTIES
  OUTPUT_NAME uraid
  EXPORT_NAME raid
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
add_library(uraid::raid_shared ALIAS raid_shared)
# Exactly the public API in the dynamic symbol table (see the map file).
target_link_options(raid_shared PRIVATE
  "LINKER:--version-script=${CMAKE_CURRENT_SOURCE_DIR}/liburaid.map")
set_property(TARGET raid_shared APPEND PROPERTY LINK_DEPENDS
             ${CMAKE_CURRENT_SOURCE_DIR}/liburaid.map)

# pkg-config names for the dependencies, and the config file's lookups of
# the private imported targets the static library's interface names.
set(URAID_PC_REQUIRES)
set(URAID_PC_REQUIRES_PRIVATE)
set(URAID_PC_LIBS_PRIVATE "-lstdc++ -lm")
set(URAID_CONFIG_FIND_PRIVATE)
foreach(_dep IN LISTS _uraid_public _uraid_private)
  set(_pc "")
  if(_dep MATCHES "^absl::(.+)$")
    set(_pc "absl_${CMAKE_MATCH_1}")
  elseif(_dep STREQUAL "Threads::Threads")
    string(APPEND URAID_PC_LIBS_PRIVATE " -pthread")
    continue()
  elseif(_dep MATCHES "^PkgConfig::(.+)$")
    # pkg_check_modules(<prefix> IMPORTED_TARGET <module>) records the
    # module's name in <prefix>_MODULE_NAME.
    set(_prefix "${CMAKE_MATCH_1}")
    if(DEFINED ${_prefix}_MODULE_NAME)
      set(_pc "${${_prefix}_MODULE_NAME}")
      string(APPEND URAID_CONFIG_FIND_PRIVATE
        "uraid_find_pkg(${_prefix} ${_pc})\n")
    endif()
  endif()
  if(_pc STREQUAL "")
    message(WARNING "libraid/install.cmake: no pkg-config name for "
            "dependency ${_dep}; uraid.pc and uraidConfig.cmake lack it")
  elseif(_dep IN_LIST _uraid_public)
    list(APPEND URAID_PC_REQUIRES "${_pc}")
  else()
    list(APPEND URAID_PC_REQUIRES_PRIVATE "${_pc}")
  endif()
endforeach()
# uraid-c.pc: the C API's headers use no Abseil, so every dependency is
# private there (needed only by a static link).
set(URAID_PC_REQUIRES_C_PRIVATE ${URAID_PC_REQUIRES} ${URAID_PC_REQUIRES_PRIVATE})
list(JOIN URAID_PC_REQUIRES_C_PRIVATE ", " URAID_PC_REQUIRES_C_PRIVATE)
list(JOIN URAID_PC_REQUIRES ", " URAID_PC_REQUIRES)
list(JOIN URAID_PC_REQUIRES_PRIVATE ", " URAID_PC_REQUIRES_PRIVATE)

# LIBRARY (liburaid.so) is its own component, uraid_runtime, so that the
# Python tests can install just it and the package (python/CMakeLists.txt).
install(TARGETS raid raid_shared EXPORT uraidTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT uraid_runtime
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/uraid DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/uraid/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/uraid)

set(_uraid_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/uraid)
install(EXPORT uraidTargets NAMESPACE uraid:: DESTINATION ${_uraid_cmake_dir})
configure_package_config_file(cmake/uraidConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/uraidConfig.cmake
  INSTALL_DESTINATION ${_uraid_cmake_dir})
# 0.x: a new minor version may break the API.
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/uraidConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/uraidConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/uraidConfigVersion.cmake
        DESTINATION ${_uraid_cmake_dir})

# uraid.pc is relocatable: prefix comes from the file's own location, so
# `cmake --install --prefix DIR` and DESTDIR staging both give correct paths.
file(RELATIVE_PATH URAID_PC_TO_PREFIX
  "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" URAID_PC_TO_PREFIX "${URAID_PC_TO_PREFIX}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR
   IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "libraid/install.cmake: CMAKE_INSTALL_LIBDIR and "
          "CMAKE_INSTALL_INCLUDEDIR must be relative to the prefix")
endif()
configure_file(cmake/uraid.pc.in ${CMAKE_CURRENT_BINARY_DIR}/uraid.pc @ONLY)
configure_file(cmake/uraid-c.pc.in ${CMAKE_CURRENT_BINARY_DIR}/uraid-c.pc
               @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/uraid.pc
              ${CMAKE_CURRENT_BINARY_DIR}/uraid-c.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
