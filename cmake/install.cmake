# Install rules: headers (with the generated Lua header), the library, a CMake package
# (find_package(redlimit)) and a pkg-config file (redlimit.pc). Included from the top CMakeLists.txt.
include(CMakePackageConfigHelpers)
set(REDLIMIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/redlimit)

install(TARGETS ${REDLIMIT_INSTALL_TARGETS} EXPORT redlimitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/redlimit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${REDLIMIT_LUA_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/redlimit/detail)
install(EXPORT redlimitTargets NAMESPACE redlimit:: DESTINATION ${REDLIMIT_CMAKE_DIR})

configure_package_config_file(cmake/redlimitConfig.cmake.in ${PROJECT_BINARY_DIR}/redlimitConfig.cmake
  INSTALL_DESTINATION ${REDLIMIT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/redlimitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/redlimitConfig.cmake ${PROJECT_BINARY_DIR}/redlimitConfigVersion.cmake
  DESTINATION ${REDLIMIT_CMAKE_DIR})

# pkg-config: `pkg-config --cflags --libs redlimit` (static: add --static for hiredis, fmt and the loops).
set(REDLIMIT_PC_REQUIRES_PRIVATE "hiredis fmt")
if(REDLIMIT_HAVE_LIBEVENT)
  string(APPEND REDLIMIT_PC_REQUIRES_PRIVATE " libevent")
endif()
if(REDLIMIT_HAVE_LIBUV)
  string(APPEND REDLIMIT_PC_REQUIRES_PRIVATE " libuv")
endif()
configure_file(cmake/redlimit.pc.in ${PROJECT_BINARY_DIR}/redlimit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/redlimit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
