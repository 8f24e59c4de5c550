# The Debian package (scripts/package): install() rules and CPack's DEB generator.
#
#   /usr/bin/tollgate                        stripped by CPack
#   /lib/systemd/system/tollgate.service     deploy/debian/tollgate.service
#   /etc/tollgate/tollgate.toml              a conffile (deploy/debian/conffiles)
#   /usr/share/man/man1/tollgate.1.gz        help2man, from the command's --help (target tollgate_man)
#   /usr/share/doc/tollgate/copyright, changelog.gz
#   /usr/share/lintian/overrides/tollgate    deploy/debian/lintian-overrides (one tag, explained there)
#
# Only scripts/package installs: the man page and the compressed changelog are built by the
# targets it names (tollgate_man, tollgate_changelog), so a normal build needs no help2man.
set(TOLLGATE_DEB_DIR ${CMAKE_SOURCE_DIR}/deploy/debian)

# The changelog's newest entry must be this version: a package whose changelog lags is refused.
file(STRINGS ${TOLLGATE_DEB_DIR}/changelog TOLLGATE_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT TOLLGATE_CHANGELOG_TOP MATCHES "^tollgate \\(${PROJECT_VERSION}\\) ")
  message(WARNING "deploy/debian/changelog starts with '${TOLLGATE_CHANGELOG_TOP}', not version ${PROJECT_VERSION}: "
                  "scripts/package will refuse to build the package")
  set(TOLLGATE_CHANGELOG_STALE TRUE)
endif()

find_program(TOLLGATE_HELP2MAN help2man)
set(TOLLGATE_MAN ${CMAKE_BINARY_DIR}/package/tollgate.1.gz)
add_custom_command(OUTPUT ${TOLLGATE_MAN}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/package
  # Run as plain `tollgate` from PATH, so that the usage lines read "tollgate …", not a build path.
  COMMAND sh -c "LC_ALL=C.UTF-8 PATH='$<TARGET_FILE_DIR:tollgate>':\"$PATH\" '${TOLLGATE_HELP2MAN}' --no-info --section=1 \
--version-string='${PROJECT_VERSION}' --name='credits ledger: reserve, commit, release; every credit spent once' \
--include='${TOLLGATE_DEB_DIR}/tollgate.h2m' tollgate | gzip -9n > '${TOLLGATE_MAN}'"
  DEPENDS tollgate ${TOLLGATE_DEB_DIR}/tollgate.h2m
  COMMENT "Generating the man page tollgate.1.gz (help2man)" VERBATIM)
add_custom_target(tollgate_man DEPENDS ${TOLLGATE_MAN})

set(TOLLGATE_CHANGELOG_GZ ${CMAKE_BINARY_DIR}/package/changelog.gz)
add_custom_command(OUTPUT ${TOLLGATE_CHANGELOG_GZ}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/package
  COMMAND sh -c "gzip -9n < '${TOLLGATE_DEB_DIR}/changelog' > '${TOLLGATE_CHANGELOG_GZ}'"
  DEPENDS ${TOLLGATE_DEB_DIR}/changelog VERBATIM)
add_custom_target(tollgate_changelog DEPENDS ${TOLLGATE_CHANGELOG_GZ})

install(TARGETS tollgate RUNTIME DESTINATION bin)
# Stripped as dh_strip strips (the symbols, and the .comment and .note sections), not by CPack's
# plain strip.
install(CODE "execute_process(COMMAND strip --remove-section=.comment --remove-section=.note --strip-unneeded
  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/bin/tollgate\" COMMAND_ERROR_IS_FATAL ANY)")
install(FILES ${TOLLGATE_DEB_DIR}/tollgate.service DESTINATION /lib/systemd/system)
install(FILES ${TOLLGATE_DEB_DIR}/tollgate.toml DESTINATION /etc/tollgate)
install(FILES ${TOLLGATE_MAN} DESTINATION share/man/man1)
install(FILES ${TOLLGATE_DEB_DIR}/copyright ${TOLLGATE_CHANGELOG_GZ} DESTINATION share/doc/tollgate)
# The one lintian tag left, with why (deploy/debian/lintian-overrides).
install(FILES ${TOLLGATE_DEB_DIR}/lintian-overrides DESTINATION share/lintian/overrides RENAME tollgate)
# `cmake --install` / cpack must not build every target (the tests, the benchmarks) first.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tollgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # tollgate_<version>_amd64.deb
set(CPACK_PACKAGE_CONTACT "tollgate maintainers <maintainers@users.noreply.a-seed-dcafb419.example>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The extended description: CPack indents each line by one space (and turns an empty line into " .").
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "credits ledger with an HTTP API: reserve, commit, release
tollgate keeps accounts of prepaid credits for apps that pay for AI calls and
kiosks: credits are reserved by a hold before the work, then committed (used)
or released, and every credit is spent once, never twice, never lost. It runs
as one HTTP service on an embedded SQLite database, or as several instances
on PostgreSQL, with a command-line client, jobs that call paid providers,
locks, idempotency keys and rate limits.
.
This package runs it as a hardened systemd service listening on 127.0.0.1;
the admin key generated at the first start is written to
/var/lib/tollgate/admin.key.")
# Depends: computed by dpkg-shlibdeps from the binary's libraries.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Providers on https:// are verified against the system's trust store (jobs/provider_client.h).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ca-certificates")
# deb-systemd-helper / deb-systemd-invoke in the maintainer scripts (what dh_installsystemd adds).
set(CPACK_DEBIAN_PACKAGE_PREDEPENDS "init-system-helpers (>= 1.54~)")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${TOLLGATE_DEB_DIR}/conffiles ${TOLLGATE_DEB_DIR}/postinst ${TOLLGATE_DEB_DIR}/prerm ${TOLLGATE_DEB_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
