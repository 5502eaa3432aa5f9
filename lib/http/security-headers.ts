/**
 * Sent with every answer: console pages, API answers, the gateway's fast path. No page may be framed
 * (a framing page could lure an operator into clicking "Release all"), no body is sniffed into
 * another type, and a link out names this site's origin only. Not `no-referrer`: browsers then send
 * `Origin: null` with the console's own POSTs, which the same-origin check refuses.
 * The list is in security-headers.mjs, which scripts/serve.mjs imports too.
 */
export { SECURITY_HEADERS } from "./security-headers.mjs";
