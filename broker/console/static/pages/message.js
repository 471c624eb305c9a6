// One message: its fields, properties and body (text, JSON or hex), which groups consumed it, its trace; a dead
// letter can be resent to its group.

import { api, badge, enc, fmtTime, h, link, section, table, toast } from "../lib.js";

const DLQ = "%DLQ%";

function bytesOf(base64) {
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16));
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const text = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${i.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${text}`);
  }
  return lines.join("\n");
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (err) {
    return null;
  }
}

function bodyView(m) {
  const json = m.bodyText === null ? null : prettyJson(m.bodyText);
  const views = { text: m.bodyText ?? "(not UTF-8 text: see hex)", json: json ?? "(not JSON)", hex: hexDump(bytesOf(m.body)) };
  const pre = h("pre", { id: "body" });
  const buttons = {};
  const choose = (name) => {
    pre.textContent = views[name];
    pre.dataset.view = name;
    for (const [key, button] of Object.entries(buttons)) button.classList.toggle("primary", key === name);
  };
  for (const [key, label] of [["text", "Text"], ["json", "JSON"], ["hex", "Hex"]]) {
    buttons[key] = h("button", { type: "button", dataset: { view: key }, onclick: () => choose(key) }, label);
  }
  choose(json !== null ? "json" : m.bodyText !== null ? "text" : "hex");
  return h("div", {}, h("div", { class: "body-views" }, Object.values(buttons)), pre);
}

async function trace(msgId, holder) {
  const t = await api("GET", `/api/traces/${enc(msgId)}`);
  holder.replaceChildren(t.records.length ? table([
    ["Type", (r) => r.type], ["Group", (r) => r.group], ["Client host", (r) => r.clientHost],
    ["Time", (r) => fmtTime(r.timestamp)], ["Cost (ms)", (r) => r.costTime], ["Status", (r) => r.status],
  ], t.records, { id: "trace" }) : h("p", { class: "muted", id: "trace" },
    `no trace records in ${t.traceTopic} (the producer did not trace it)`));
}

export async function render({ args }) {
  const [topic, msgId] = args;
  const m = await api("GET", `/api/topics/${enc(topic)}/messages/${enc(msgId)}`);
  const fields = [
    ["Topic", link(`#/topic/${enc(m.topic)}`, m.topic)], ["Message id", m.msgId], ["Offset message id", m.offsetMsgId],
    ["Broker", m.brokerName], ["Queue", m.queueId], ["Queue offset", m.queueOffset], ["CommitLog offset", m.commitLogOffset],
    ["Keys", m.keys], ["Tags", m.tags], ["Born", `${fmtTime(m.bornTimestamp)} by ${m.bornHost}`],
    ["Stored", `${fmtTime(m.storeTimestamp)} on ${m.storeHost}`], ["Reconsume times", m.reconsumeTimes],
    ["Body size", `${m.bodySize} bytes`], ["System flag", m.sysFlag],
  ];
  const traceHolder = h("div", {}, h("p", { class: "muted" }, "loading..."));
  trace(m.msgId, traceHolder).catch((err) => traceHolder.replaceChildren(h("div", { class: "error" }, err.message)));
  const parts = [
    h("h1", {}, `Message ${m.msgId}`),
    section("Message", h("dl", { class: "kv", id: "fields" }, fields.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "")]))),
    section("Body", bodyView(m)),
    section("Properties", table([["Name", (p) => p[0]], ["Value", (p) => h("span", { class: "mono" }, p[1])]],
      Object.entries(m.properties), { id: "properties" })),
    section("Consumed by", table([["Group", (t) => link(`#/group/${enc(t.consumerGroup)}`, t.consumerGroup)],
      ["State", (t) => t.trackType], ["Detail", (t) => t.exceptionDesc]], m.tracks, { id: "tracks" })),
    section("Trace", traceHolder),
  ];
  if (topic.startsWith(DLQ)) {
    const group = topic.slice(DLQ.length);
    parts.splice(1, 0, section("Dead letter of " + group, h("button", { type: "button", class: "primary", id: "resend",
      onclick: async (event) => {
        event.target.disabled = true;
        try {
          const sent = await api("POST", `/api/groups/${enc(group)}/dlq/resend`, { msgId: m.msgId });
          toast(`resent to ${sent.topic} as ${sent.msgId}`);
          event.target.replaceWith(badge(`resent to ${sent.topic} as ${sent.msgId}`, "ok"));
        } catch (err) {
          toast(err.message, "bad");
          event.target.disabled = false;
        }
      } }, `Resend to ${group}`)));
  }
  return h("div", {}, ...parts);
}
