// Public suffixes: names under which anyone can register their own (com, co.uk, github.io), from
// Debian's publicsuffix package (/usr/share/publicsuffix/public_suffix_list.dat, the ICANN and
// the private sections). A session's wildcard directly over one (*.co.uk, *.github.io) would
// reach whatever anybody puts there, so egress_rule.cc refuses it. Without the file, only
// top-level domains count. Names in the list's Unicode form match no rule name (those are
// ASCII); their punycode forms are not known here. Thread-safe; the file is read once.
#ifndef AIRLOCK_NET_PUBLIC_SUFFIX_H_
#define AIRLOCK_NET_PUBLIC_SUFFIX_H_

#include <string>

namespace airlock::net {

inline constexpr char kPublicSuffixList[] = "/usr/share/publicsuffix/public_suffix_list.dat";

// Whether a normalized name (lower case, no trailing dot) is a public suffix: a rule of the
// list, a name one label below a wildcard rule (*.ck), not an exception (!www.ck); or a single
// label (a top-level domain) whatever the list says.
bool IsPublicSuffix(const std::string& name);

// The same against the text of a list (for tests).
bool IsPublicSuffixIn(const std::string& list, const std::string& name);

}  // namespace airlock::net

#endif  // AIRLOCK_NET_PUBLIC_SUFFIX_H_
