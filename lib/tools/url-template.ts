/** `{orderId}` in a URL's path: the argument's value, encoded as one path segment's text. */
export const TEMPLATE = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The arguments a tool's URL names as `{argument}`, in order, each once. */
export function pathTemplateNames(url: string): string[] {
  return [...new Set([...url.matchAll(TEMPLATE)].map((m) => m[1]))];
}

/**
 * What is wrong with a URL template, or null: templates belong in the path (a host or a query
 * built from arguments would send the call somewhere nobody configured), and every brace is one.
 */
export function urlTemplateProblem(url: string): string | null {
  const bare = url.replace(TEMPLATE, "");
  if (/[{}]/.test(bare)) return "has a brace that is not an {argument} template (names are letters, digits and _)";
  const positions = [...url.matchAll(TEMPLATE)].map((m) => m.index);
  if (positions.length === 0) return null;
  const authorityEnd = url.indexOf("/", url.indexOf("//") + 2);
  if (authorityEnd === -1 || positions.some((at) => at < authorityEnd)) return "may use {argument} templates in its path only, not in its host";
  const queryStart = url.search(/[?#]/);
  // every template, not only the first: /v1/{id}?to={email} puts one in the query
  if (queryStart !== -1 && positions.some((at) => at > queryStart)) return "may use {argument} templates in its path only; send arguments as query parameters with `query`";
  return null;
}

