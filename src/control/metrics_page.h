// The scheduler's live page (PS_METRICS_PORT, path "/"): one self-contained HTML document, no
// external scripts or styles, that polls /stats every second and draws the job.
#ifndef PS_CONTROL_METRICS_PAGE_H_
#define PS_CONTROL_METRICS_PAGE_H_

namespace ps {

/// The page's HTML (static text; everything it shows comes from /stats).
const char* LivePageHtml();

}  // namespace ps

#endif  // PS_CONTROL_METRICS_PAGE_H_
