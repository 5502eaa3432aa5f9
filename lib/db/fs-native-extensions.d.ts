// Types for the part of fs-native-extensions the embedded database's lock uses (the package ships none).
declare module "fs-native-extensions" {
  /**
   * Asks for a lock on an open file without waiting: true when granted, false when another open file
   * description holds a conflicting lock. On Linux an open-file-description lock (F_OFD_SETLK), on
   * macOS flock, on Windows LockFileEx: the OS drops it when the descriptor closes or the process dies.
   */
  export function tryLock(fd: number, options?: { shared?: boolean }): boolean;
  export function tryLock(fd: number, offset: number, length: number, options?: { shared?: boolean }): boolean;
  export function unlock(fd: number, offset?: number, length?: number): void;
}
