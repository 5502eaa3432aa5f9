export const ROLES = ["viewer", "operator"] as const;
export type Role = (typeof ROLES)[number];

/** A signed-in operator, or the operator behind a console action. */
export interface OperatorIdentity {
  id: string;
  email: string;
  role: Role;
}

/** What each role may do; checked on the server for every page, route handler and action. */
const PERMISSIONS = {
  // saving a view changes nothing but the operator's own list of views, so reading is enough
  viewer: ["read", "save_views"],
  operator: ["read", "save_views", "release", "resolve", "acknowledge", "reconcile", "invoke", "manage_tokens", "redeliver", "pause_tools"],
} as const satisfies Record<Role, readonly string[]>;

export type Permission = (typeof PERMISSIONS)["operator"][number];

export function can(role: Role, permission: Permission): boolean {
  return (PERMISSIONS[role] as readonly string[]).includes(permission);
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
