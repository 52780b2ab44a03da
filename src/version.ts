/** The Skeid version, printed by `skeid version` and sent as `User-Agent` nowhere. */
export const VERSION = "0.1.0";
