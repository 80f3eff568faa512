// How the workspace writes times, channels and browsers.

export const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
export const dateFormat = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", year: "numeric" });

export const channelNames = {
  web: "Web chat", in_app: "In-app", whatsapp: "WhatsApp", messenger: "Messenger", apple: "Apple Messages", sms: "SMS",
};

/** "Chrome on Android" from a User-Agent: enough for an agent to picture the customer's screen. */
export function browserName(agent) {
  const browser = /Edg\//.test(agent) ? "Edge" : /OPR\//.test(agent) ? "Opera" : /Firefox\//.test(agent) ? "Firefox"
    : /Chrome\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : "A browser";
  const system = /iPhone|iPad/.test(agent) ? "iOS" : /Android/.test(agent) ? "Android" : /Mac OS X/.test(agent) ? "macOS"
    : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : "";
  return system ? `${browser} on ${system}` : browser;
}

/** "23 h 20 min" left of a reply window; "5 d 3 h" for more than two days (Messenger's Human Agent window). */
export function timeLeft(milliseconds) {
  const total = Math.ceil(milliseconds / 60_000);
  const days = Math.floor(total / 1440);
  const hours = Math.floor((total % 1440) / 60);
  const minutes = total % 60;
  const parts = days >= 2
    ? [`${days} d`, hours ? `${hours} h` : ""]
    : [Math.floor(total / 60) ? `${Math.floor(total / 60)} h` : "", minutes || total < 60 ? `${minutes} min` : ""];
  return parts.filter(Boolean).join(" ");
}
