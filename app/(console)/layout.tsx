import { Providers } from "@/components/providers";
import { requireOperator } from "@/lib/auth/require-operator";

// Every console page also calls requireOperator() itself: a layout is not re-run on client navigation.
export default async function ConsoleLayout({ children }: { children: React.ReactNode }) {
  await requireOperator();
  return <Providers>{children}</Providers>;
}
