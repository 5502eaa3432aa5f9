import { notFound } from "next/navigation";
import { requireOperator } from "@/lib/auth/require-operator";

export const dynamic = "force-dynamic";

// Any console URL no page serves: the not-found page inside the console (app/(console)/not-found.tsx)
export default async function MissingPage() {
  await requireOperator();
  notFound();
}
