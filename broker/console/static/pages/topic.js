// One topic: its brokers and queues (min and max offsets), the groups consuming it, a test message, its settings,
// and deleting it (after typing its name).

import { api, confirmTyped, enc, field, fmtNum, fmtTime, form, h, link, section, table, toast } from "../lib.js";

export async function render({ args }) {
  const name = args[0];
  const t = await api("GET", `/api/topics/${enc(name)}`);
  const clusters = [...new Set(t.brokers.map((b) => b.cluster))];
  const first = t.brokers[0] || {};

  const route = table([
    ["Cluster", (b) => b.cluster], ["Broker", (b) => b.brokerName],
    ["Addresses", (b) => Object.entries(b.addrs).map(([id, a]) => `${id}: ${a}`).join(", ")],
    ["Read queues", (b) => b.readQueueNums], ["Write queues", (b) => b.writeQueueNums], ["Permission", (b) => b.permText],
  ], t.brokers, { id: "route" });
  const queues = table([
    ["Broker", (q) => q.brokerName], ["Queue", (q) => q.queueId], ["Min offset", (q) => q.minOffset],
    ["Max offset", (q) => q.maxOffset], ["Messages", (q) => q.messages], ["Last update", (q) => fmtTime(q.lastUpdateTimestamp)],
    ["", (q) => link(`#/messages?by=offset&topic=${enc(name)}&brokerName=${enc(q.brokerName)}&queueId=${q.queueId}` +
      `&offset=${Math.max(q.minOffset, q.maxOffset - 1)}`, "last message")],
  ], t.queues, { id: "queues" });
  const total = t.queues.reduce((sum, q) => sum + q.messages, 0);

  const result = h("div", { id: "send-result" });
  const send = form({ id: "send-message" }, [
    field("Body", h("textarea", { name: "body", required: true }, "Hello from mqconsole")),
    field("Keys", h("input", { name: "keys" })), field("Tags", h("input", { name: "tags" })),
  ], "Send", async (values) => {
    const sent = await api("POST", `/api/topics/${enc(name)}/messages`, values);
    result.replaceChildren(h("p", {}, `${sent.sendStatus}: message `,
      link(`#/message/${enc(name)}/${enc(sent.msgId)}`, sent.msgId),
      ` in ${sent.brokerName} queue ${sent.queueId} at offset ${sent.queueOffset}`));
    toast(`sent ${sent.msgId}`);
  });

  const update = form({ id: "update-topic" }, [
    field("Read queues", h("input", { name: "readQueueNums", type: "number", min: 1, value: first.readQueueNums || 4 })),
    field("Write queues", h("input", { name: "writeQueueNums", type: "number", min: 1, value: first.writeQueueNums || 4 })),
    field("Permission", h("select", { name: "perm" }, [["6", "read and write"], ["4", "read"], ["2", "write"]]
      .map(([v, label]) => h("option", { value: v, selected: String(first.perm) === v }, label)))),
  ], "Update", async (values) => {
    for (const cluster of clusters) {
      await api("POST", "/api/topics", { topic: name, cluster, order: t.order, readQueueNums: Number(values.readQueueNums),
        writeQueueNums: Number(values.writeQueueNums), perm: Number(values.perm) });
    }
    toast(`topic ${name} updated`);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  });

  const remove = h("button", { type: "button", class: "danger", id: "delete-topic", onclick: async () => {
    if (!await confirmTyped(`Delete topic ${name} from ${clusters.join(", ")}? Its messages can no longer be read.`,
      name, "Delete")) return;
    try {
      await api("DELETE", `/api/topics/${enc(name)}?confirm=${enc(name)}`);
      toast(`topic ${name} deleted`);
      location.hash = "#/topics";
    } catch (err) {
      toast(err.message, "bad");
    }
  } }, "Delete topic...");

  return h("div", {},
    h("h1", {}, `Topic ${name} `, h("span", { class: "badge" }, t.type)),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("b", {}, t.queues.length), h("span", {}, "queues")),
      h("div", { class: "card" }, h("b", {}, fmtNum(total)), h("span", {}, "messages held")),
      h("div", { class: "card" }, h("b", {}, t.consumerGroups.length), h("span", {}, "consumer groups"))),
    section("Route", route),
    section("Queues", queues),
    section("Consumer groups", t.consumerGroups.length
      ? h("ul", { id: "consumer-groups" }, t.consumerGroups.map((g) => h("li", {}, link(`#/group/${enc(g)}`, g))))
      : h("p", { class: "muted" }, "no group consumes it")),
    section("Send a test message", send, result),
    section("Settings", update),
    section("Delete", h("p", { class: "muted" }, "Removes the topic from every broker of its clusters and from the NameServer."),
      remove));
}
