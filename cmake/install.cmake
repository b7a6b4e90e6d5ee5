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

# pkg-config: `pkg-config --cflags --libs --static redlimit` (--static: the libraries are static
# archives, so the link needs hiredis, fmt and the event loops of Requires.private too). The file is
# written at install time, with the prefix being installed to: `cmake --install build --prefix /opt/x`
# must give a redlimit.pc that points at /opt/x, not at the CMAKE_INSTALL_PREFIX of the configure.
set(REDLIMIT_PC_REQUIRES_PRIVATE "hiredis fmt")
if(REDLIMIT_HAVE_LIBEVENT)
  string(APPEND REDLIMIT_PC_REQUIRES_PRIVATE " libevent")
endif()
if(REDLIMIT_HAVE_LIBUV)
  string(APPEND REDLIMIT_PC_REQUIRES_PRIVATE " libuv")
endif()
if(REDLIMIT_HAVE_TLS)
  string(APPEND REDLIMIT_PC_REQUIRES_PRIVATE " hiredis_ssl openssl")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(REDLIMIT_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(REDLIMIT_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
install(CODE "
  set(REDLIMIT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(REDLIMIT_PC_LIBDIR [[${REDLIMIT_PC_LIBDIR}]])
  set(REDLIMIT_PC_INCLUDEDIR [[${REDLIMIT_PC_INCLUDEDIR}]])
  set(REDLIMIT_PC_REQUIRES_PRIVATE [[${REDLIMIT_PC_REQUIRES_PRIVATE}]])
  set(PROJECT_VERSION [[${PROJECT_VERSION}]])
  configure_file([[${PROJECT_SOURCE_DIR}/cmake/redlimit.pc.in]] [[${PROJECT_BINARY_DIR}/redlimit.pc]] @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/redlimit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
