import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { LoginForm } from "@/components/auth/login-form";
import { safeNextPath } from "@/lib/auth/safe-next-path";
import { currentOperator } from "@/lib/auth/session";
import { signIn } from "@/lib/auth/sign-in-actions";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Sign in" };

export default async function LoginPage({ searchParams }: { searchParams: Promise<{ next?: string | string[] }> }) {
  const { next: raw } = await searchParams;
  const next = safeNextPath(Array.isArray(raw) ? raw[0] : raw);
  if (await currentOperator()) redirect(next);
  return (
    <div className="mx-auto mt-10 max-w-sm">
      <div className="rounded-xl border border-line bg-surface p-6 shadow-xs">
        <h1 className="text-lg font-semibold tracking-tight">Sign in to the console</h1>
        <p className="mt-1 mb-5 text-[13px] text-muted">
          The first start wrote an operator account to <code className="font-mono text-[12px]">.data/credentials.txt</code>.
        </p>
        <LoginForm action={signIn} next={next} />
      </div>
    </div>
  );
}
