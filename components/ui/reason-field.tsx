import { inputClass } from "@/components/ui/styles";

/** Every operator action needs a reason; it goes into the audit trail with the actor. */
export function ReasonField({
  value,
  onChange,
  id = "reason",
  placeholder = "e.g. what you checked, and what you found",
}: {
  value: string;
  onChange: (v: string) => void;
  id?: string;
  /** an example that fits the action being taken */
  placeholder?: string;
}) {
  return (
    <div className="space-y-1.5">
      <label htmlFor={id} className="block text-[13px] font-medium">
        Reason <span className="font-normal text-muted">(recorded in the audit trail)</span>
      </label>
      <textarea
        id={id}
        name="reason"
        required
        minLength={3}
        maxLength={1000}
        rows={3}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        placeholder={placeholder}
        className={`${inputClass} w-full resize-y`}
        data-testid="reason-input"
      />
    </div>
  );
}

export const reasonOk = (reason: string) => reason.trim().length >= 3;
