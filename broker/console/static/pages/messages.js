// Message lookups: by key, by id, by queue and offset, by store-time range; results link to each message.

import { api, enc, field, fmtTime, form, h, link, localMs, section, table, toLocalInput } from "../lib.js";

const MODES = {
  key: { label: "By key", fields: [["key", "Key"]] },
  id: { label: "By id", fields: [["msgId", "Message id"]] },
  offset: { label: "By queue and offset", fields: [["brokerName", "Broker"], ["queueId", "Queue", "number"],
    ["offset", "Offset", "number"]] },
  time: { label: "By time range", fields: [["begin", "From", "datetime-local"], ["end", "To", "datetime-local"]] },
};

function results(messages) {
  return table([
    ["Message id", (m) => link(`#/message/${enc(m.topic)}/${enc(m.msgId)}`, m.msgId)],
    ["Topic", (m) => m.topic], ["Broker", (m) => m.brokerName], ["Queue", (m) => m.queueId],
    ["Offset", (m) => m.queueOffset], ["Keys", (m) => m.keys], ["Tags", (m) => m.tags],
    ["Stored", (m) => fmtTime(m.storeTimestamp)], ["Size", (m) => m.bodySize],
  ], messages, { id: "results" });
}

export async function render({ query }) {
  const topics = await api("GET", "/api/topics");
  const mode = MODES[query.get("by")] ? query.get("by") : "key";
  const holder = h("div", { id: "lookup-results" });
  const now = Date.now();
  const defaults = { begin: toLocalInput(now - 3600 * 1000), end: toLocalInput(now + 60 * 1000) };
  const inputs = [
    field("Topic", h("input", { name: "topic", list: "topic-names", required: true, value: query.get("topic") || "" })),
    ...MODES[mode].fields.map(([name, label, type = "text"]) => field(label, h("input", { name, type, required: true,
      step: type === "datetime-local" ? 0.001 : null, value: query.get(name) || defaults[name] || "" }))),
  ];
  const run = async (values) => {
    const params = new URLSearchParams({ topic: values.topic });
    for (const [name, , type] of MODES[mode].fields) {
      params.set(name, type === "datetime-local" ? localMs(values[name]) : values[name]);
    }
    holder.replaceChildren(h("p", { class: "muted" }, "looking..."));
    const found = await api("GET", `/api/messages/by-${mode}?${params}`);
    holder.replaceChildren(h("p", { class: "muted", id: "found-count" }, `${found.messages.length} found`),
      results(found.messages));
  };
  const lookup = form({ id: "lookup", dataset: { mode } }, inputs, "Look up", run);
  const tabs = h("div", { class: "tabs" }, Object.entries(MODES).map(([key, m]) => h("button", {
    type: "button", class: key === mode ? "active" : null, dataset: { mode: key },
    onclick: () => { location.hash = `#/messages?by=${key}&topic=${enc(lookup.topic.value)}`; } }, m.label)));
  const datalist = h("datalist", { id: "topic-names" },
    topics.topics.filter((t) => t.type !== "SYSTEM").map((t) => h("option", { value: t.topic })));
  const ready = MODES[mode].fields.every(([name]) => query.get(name)) && query.get("topic");
  if (ready) {
    run(Object.fromEntries(new FormData(lookup).entries())).catch((err) =>
      holder.replaceChildren(h("div", { class: "error" }, err.message)));
  }
  return h("div", {}, h("h1", {}, "Messages"), tabs, section(MODES[mode].label, lookup, datalist), holder);
}
