// The dashboard's web page: one HTML document, its script and its style, served as they are.
// The script fetches /api/state every two seconds and builds everything it shows with DOM calls
// and textContent: nothing airlockd reports is ever parsed as HTML. With a login, /login serves
// the form.
#ifndef AIRLOCK_DASHBOARD_DASHBOARD_PAGE_H_
#define AIRLOCK_DASHBOARD_DASHBOARD_PAGE_H_

namespace airlock {

extern const char kDashboardHtml[];
extern const char kDashboardScript[];
extern const char kDashboardStyle[];
extern const char kDashboardLoginHtml[];  // "%MESSAGE%" marks where a refusal is said

}  // namespace airlock

#endif  // AIRLOCK_DASHBOARD_DASHBOARD_PAGE_H_
