// The page's router: "#/<page>/<argument>?query" picks a page module, which renders into <main>. When a page has
// loaded its data, <main> gets data-ready="<page>" (what the browser tests wait for); a failure shows in the page.

import { api, errorBox, h } from "./lib.js";
import * as cluster from "./pages/cluster.js";
import * as topics from "./pages/topics.js";
import * as topic from "./pages/topic.js";
import * as groups from "./pages/groups.js";
import * as group from "./pages/group.js";
import * as messages from "./pages/messages.js";
import * as message from "./pages/message.js";
import * as charts from "./pages/charts.js";

const PAGES = { cluster, topics, topic, groups, group, messages, message, charts };
const NAV = { topic: "topics", group: "groups", message: "messages" };
let leave = null; // what the current page stops when another one opens (the charts' refresh)
let generation = 0;

function parseHash() {
  const [path, query = ""] = (location.hash || "#/cluster").slice(2).split("?");
  const [name, ...rest] = path.split("/");
  return { name: name || "cluster", args: rest.map(decodeURIComponent), query: new URLSearchParams(query) };
}

async function show() {
  const { name, args, query } = parseHash();
  const page = PAGES[name] || cluster;
  const main = document.getElementById("main");
  if (leave) { leave(); leave = null; }
  const mine = ++generation;
  main.replaceChildren(h("p", { class: "muted" }, "loading..."));
  delete main.dataset.ready;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("active", link.dataset.nav === (NAV[name] || name));
  }
  document.title = `mqconsole - ${name}`;
  try {
    const view = await page.render({ args, query, onLeave: (fn) => { leave = fn; } });
    if (mine !== generation) return; // another page opened meanwhile
    main.replaceChildren(view);
  } catch (err) {
    if (mine !== generation) return;
    main.replaceChildren(errorBox(err));
  }
  main.dataset.ready = name;
}

window.addEventListener("hashchange", show);
api("GET", "/api/health").then((health) => {
  document.getElementById("namesrv").textContent = `NameServer ${health.namesrvAddr}`;
}).catch(() => {});
show();
