// One consumer group: its clients and subscriptions, each queue's lag and last consume time, resetting its offsets
// to a time, and its dead letters with a resend.

import { api, badge, enc, field, fmtNum, fmtTime, form, h, link, localMs, section, table, toast, toLocalInput }
  from "../lib.js";
import { stateBadge } from "./groups.js";

async function deadLetters(name, holder) {
  const dlq = await api("GET", `/api/groups/${enc(name)}/dlq`);
  holder.replaceChildren(table([
    ["Message", (m) => link(`#/message/${enc(dlq.topic)}/${enc(m.msgId)}`, m.msgId)],
    ["Stored", (m) => fmtTime(m.storeTimestamp)], ["Keys", (m) => m.keys], ["Tags", (m) => m.tags],
    ["Reconsumed", (m) => m.reconsumeTimes],
    ["", (m) => h("button", { type: "button", class: "resend", onclick: async (event) => {
      event.target.disabled = true;
      try {
        const sent = await api("POST", `/api/groups/${enc(name)}/dlq/resend`, { msgId: m.msgId });
        toast(`resent to ${sent.topic} as ${sent.msgId}`);
        event.target.replaceWith(badge(`resent as ${sent.msgId}`, "ok"));
      } catch (err) {
        toast(err.message, "bad");
        event.target.disabled = false;
      }
    } }, "Resend to the group")],
  ], dlq.messages, { id: "dlq" }));
}

export async function render({ args }) {
  const name = args[0];
  const g = await api("GET", `/api/groups/${enc(name)}`);
  const clients = table([
    ["Client", (c) => h("span", {}, c.clientId, c.spark ? " " : "", c.spark ? badge("Spark query", "spark") : "")],
    ["Address", (c) => c.clientAddr], ["Language", (c) => c.language], ["Version", (c) => c.version],
  ], g.clients, { id: "clients" });
  const subscriptions = table([["Topic", (s) => link(`#/topic/${enc(s.topic)}`, s.topic)],
    ["Expression", (s) => s.expression]], g.subscriptions, { id: "subscriptions" });
  const queues = table([
    ["Topic", (q) => q.topic], ["Broker", (q) => q.brokerName], ["Queue", (q) => q.queueId],
    ["Broker offset", (q) => q.brokerOffset], ["Consumer offset", (q) => q.consumerOffset], ["Lag", (q) => q.lag],
    ["In flight", (q) => q.inflight], ["Last consumed", (q) => fmtTime(q.lastTimestamp) || "N/A"],
  ], g.queues, { id: "progress" });

  const resetResult = h("div", { id: "reset-result" });
  const reset = form({ id: "reset-offsets" }, [
    field("Topic", h("select", { name: "topic" }, g.topics.map((t) => h("option", { value: t }, t)))),
    field("Time", h("input", { name: "time", type: "datetime-local", step: 0.001, required: true,
      value: toLocalInput(Date.now() - 3600 * 1000) })),
    h("label", { class: "field check" }, h("input", { type: "checkbox", name: "force", checked: true }),
      h("span", {}, "also move offsets forward")),
  ], "Reset offsets", async (values) => {
    const done = await api("POST", `/api/groups/${enc(name)}/reset`,
      { topic: values.topic, timestamp: localMs(values.time), force: values.force });
    resetResult.replaceChildren(h("p", {}, `offsets of ${done.topic} reset to ${fmtTime(done.timestamp)} ` +
      (done.mode === "broker" ? "by the brokers" : "by the console (the group is offline)")),
      table([["Broker", (q) => q.brokerName], ["Queue", (q) => q.queueId], ["New offset", (q) => q.offset]], done.queues));
    toast(`offsets of ${name} reset`);
  });

  const dlqHolder = h("div", {}, h("p", { class: "muted" }, "loading..."));
  if (g.dlqTopic) deadLetters(name, dlqHolder).catch((err) => dlqHolder.replaceChildren(h("div", { class: "error" }, err.message)));
  else dlqHolder.replaceChildren(h("p", { class: "muted" }, "no dead letters"));

  return h("div", {},
    h("h1", {}, `Consumer group ${name} `, stateBadge(g), g.spark ? " " : "", g.spark ? badge("Spark query", "spark") : ""),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("b", {}, g.members), h("span", {}, "members")),
      h("div", { class: "card" }, h("b", {}, fmtNum(g.lag)), h("span", {}, "messages behind")),
      h("div", { class: "card" }, h("b", {}, g.tps), h("span", {}, "consumed / s")),
      h("div", { class: "card" }, h("b", {}, g.consumeType || "-"), h("span", {}, g.messageModel || "type"))),
    section("Clients", clients),
    section("Subscriptions", subscriptions),
    section("Progress per queue", queues),
    section("Reset offsets by time", reset, resetResult),
    section(`Dead letters${g.dlqTopic ? ` (${g.dlqTopic})` : ""}`, dlqHolder));
}
