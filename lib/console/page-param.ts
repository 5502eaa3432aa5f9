/**
 * A dynamic segment as a console page receives it. Next.js hands pages their params
 * percent-encoded (route handlers get them decoded, and decode nothing again), so a page decodes
 * each exactly once, here: a key "order%41-1" arrives as "order%2541-1" and is that key, not
 * "orderA-1". A segment that is not valid percent-encoding (a raw "%") names nothing: null.
 */
export function pageParam(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/**
 * A dynamic segment as generateMetadata receives it: Next.js (16.2 on) hands metadata its params
 * decoded already, unlike the page itself, so a title decodes nothing again ("order%2541" in the
 * address is the key "order%41", not "orderA").
 */
export function metadataParam(segment: string): string {
  return segment;
}
