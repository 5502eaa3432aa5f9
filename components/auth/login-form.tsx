"use client";

import { useActionState } from "react";
import type { SignInState } from "@/lib/auth/sign-in-actions";
import { buttonClass, inputClass } from "@/components/ui/styles";

export function LoginForm({ action, next }: { action: (prev: SignInState, form: FormData) => Promise<SignInState>; next: string }) {
  const [state, formAction, pending] = useActionState(action, { error: null, email: "" });
  return (
    <form action={formAction} className="space-y-4">
      <input type="hidden" name="next" value={next} />
      <div className="space-y-1.5">
        <label htmlFor="email" className="block text-[13px] font-medium">
          Email
        </label>
        <input
          id="email"
          name="email"
          type="email"
          autoComplete="username"
          required
          autoFocus
          defaultValue={state.email}
          className={`${inputClass} w-full`}
        />
      </div>
      <div className="space-y-1.5">
        <label htmlFor="password" className="block text-[13px] font-medium">
          Password
        </label>
        <input id="password" name="password" type="password" autoComplete="current-password" required className={`${inputClass} w-full`} />
      </div>
      {state.error && (
        <p role="alert" data-testid="login-error" className="rounded-md border border-bad/30 bg-bad-soft px-3 py-2 text-[13px] text-bad">
          {state.error}
        </p>
      )}
      <button type="submit" disabled={pending} className={`${buttonClass("primary")} w-full`}>
        {pending ? "Signing in…" : "Sign in"}
      </button>
    </form>
  );
}
