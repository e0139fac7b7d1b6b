// Certificates for tests, made with the openssl command (argv, no shell): a throwaway CA and
// certificates it signs; and a free loopback port to serve them on.
#ifndef AIRLOCK_TESTS_TEST_CERTS_H_
#define AIRLOCK_TESTS_TEST_CERTS_H_

#include <string>
#include <vector>

namespace airlock {

// Runs /usr/bin/openssl with args; a failure fails the test.
void OpenSsl(const std::vector<std::string>& args);
// dir/ca.key and dir/ca.pem: a CA valid for a day.
void MakeTestCa(const std::string& dir);
// dir/NAME.key and dir/NAME.pem: a certificate for `cn` (also its DNS subjectAltName) signed
// by dir/ca.pem.
void Issue(const std::string& dir, const std::string& name, const std::string& cn);
// A TCP port on 127.0.0.1 that nothing listens on right now.
int FreePort();

}  // namespace airlock

#endif  // AIRLOCK_TESTS_TEST_CERTS_H_
