import type { Metadata } from "next";
import { SearchResults } from "@/components/search/search-results";
import { requireOperator } from "@/lib/auth/require-operator";
import { HttpError } from "@/lib/http/problem";
import { search } from "@/lib/operator/search";
import { sessionSearch } from "@/lib/operator/parse-search";
import { redirect } from "next/navigation";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Search" };

export default async function SearchPage({ searchParams }: { searchParams: Promise<{ q?: string | string[] }> }) {
  await requireOperator();
  const raw = (await searchParams).q;
  const q = Array.isArray(raw) ? raw[0] : raw;
  const session = sessionSearch(q);
  if (session) redirect(`/runs/${encodeURIComponent(session)}`);
  try {
    return <SearchResults q={q ?? ""} answer={await search(await getRuntime(), q)} />;
  } catch (err) {
    if (err instanceof HttpError && err.status === 400) return <SearchResults q={q ?? ""} problem={err.message} />;
    throw err;
  }
}
