// Package repositories as real work reaches them, served by the tests on loopback: a Python
// package index (PEP 503 simple pages) with one pure wheel, a flat Debian repository with one
// package, and an npm registry with one package, built here (libarchive, the host's dpkg-deb).
#ifndef AIRLOCK_TESTS_PACKAGE_MIRROR_H_
#define AIRLOCK_TESTS_PACKAGE_MIRROR_H_

#include <map>
#include <string>

#include "tests/loopback_http_server.h"

namespace airlock {

// A wheel of one module, airlock_demo (VALUE = 42).
std::string DemoWheel();
inline constexpr char kDemoWheelName[] = "airlock_demo-1.0-py3-none-any.whl";

// The paths of a flat Debian repository under /debian/ ("deb [trusted=yes]
// http://HOST/debian ./") with their bodies: Packages, Release and airlock-hello_1.0_all.deb,
// whose /usr/bin/airlock-hello prints "hello from a package".
std::map<std::string, std::string> DemoDebianRepository();

// The paths of an npm registry (`npm install --registry http://HOST/`) with one package,
// airlock-demo-js 1.0.0 (module.exports.VALUE = 42): its packument at /airlock-demo-js and its
// tarball, whose URL names HOST, with the integrity npm checks.
std::map<std::string, std::string> DemoNpmRegistry(const std::string& host);

// A server's handler: the index serving DemoWheel() as airlock-demo under /simple/ and
// /files/, and `extra` paths with their bodies.
LoopbackHttpServer::Handler DemoIndex(std::map<std::string, std::string> extra = {});

}  // namespace airlock

#endif  // AIRLOCK_TESTS_PACKAGE_MIRROR_H_
