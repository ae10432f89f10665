"""The label page of `tfm-cls label`: one suggestion at a time with the current model's guess and
why it was picked; a key per label (1-9, then a-z) labels it (multi-label: keys toggle, Enter
saves), s skips, and "more" suggests again with the labels given so far. One HTML string with its
style and script inline (the serve page's look): no external assets, works offline. It talks to
/api/state, /api/label and /api/more only."""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>tfm-cls label</title>
<style>
 body{font:15px/1.4 system-ui,sans-serif;max-width:760px;margin:2em auto;padding:0 1em;color:#1d2330}
 h1{font-size:1.3em;margin:0 0 .2em} .muted{color:#667;font-size:.9em}
 #text{font-size:1.15em;padding:.9em 1em;border:1px solid #bbc;border-radius:6px;margin:.8em 0;white-space:pre-wrap;
  min-height:3em;background:#fafbfe}
 button{font:inherit;padding:.45em 1em;border:0;border-radius:6px;background:#2b59c3;color:#fff;cursor:pointer;margin:.2em .3em .2em 0}
 button.guess{background:#1f9d55} button.on{outline:3px solid #f0a500} button.plain{background:#e6e9f2;color:#1d2330}
 kbd{font:12px ui-monospace,monospace;background:rgba(255,255,255,.25);border-radius:3px;padding:0 .3em;margin-right:.4em}
 button.plain kbd{background:#fff} #reason{font-size:.9em;color:#445} #guess{margin:.3em 0}
 #error{color:#b00020;white-space:pre-wrap} #counts{font-size:.85em;color:#445} #done{font-size:1.05em;margin:1em 0}
</style></head><body>
<h1>tfm-cls label</h1><div class="muted" id="subtitle">loading...</div>
<div id="card" hidden>
 <div class="muted" id="position"></div>
 <div id="text"></div>
 <div id="guess"></div><div id="reason"></div>
 <div id="keys"></div>
 <div><button class="plain" id="skip"><kbd>s</kbd>skip</button><button class="plain" id="save" hidden><kbd>Enter</kbd>save</button></div>
</div>
<div id="done" hidden>All suggestions of this round are done. <button id="more"><kbd>m</kbd>suggest more</button>
 <div class="muted">Then train on them: <code id="train"></code></div></div>
<div id="error"></div>
<p id="counts"></p>
<script>
"use strict";
const $ = id => document.getElementById(id);
const KEYS = "123456789abcdefghijklmnopqrtuvwxyz";  // no s (skip) and no m (more)
let state = null, at = 0, chosen = new Set();
async function call(path, body){
 const r = await fetch(path, body === undefined ? {} : {method:"POST", headers:{"Content-Type":"application/json"},
   body: JSON.stringify(body)});
 const data = await r.json();
 if(!r.ok){ throw new Error(data.error || r.statusText); }
 return data;
}
function showCounts(){
 $("counts").textContent = "labelled in " + state.data + ": " +
   state.labels.map((n,i)=>n+" "+state.counts[i]).join(" \\u00b7 ");
}
function show(){
 $("error").textContent = "";
 const s = state.suggestions[at];
 $("card").hidden = !s; $("done").hidden = !!s;
 showCounts();
 if(!s){ return; }
 chosen = new Set();
 $("position").textContent = "suggestion " + (at+1) + " of " + state.suggestions.length + " \\u00b7 line " + s.line;
 $("text").textContent = s.text;
 const g = s.guess;
 const guessed = !g ? [] : (g.labels || [g.label]);
 $("guess").textContent = !g ? "no guess yet" : "guess: " + guessed.join(", ") +
   (g.score !== undefined ? " (" + g.score.toFixed(2) + ")" : "") + (g.from ? " \\u2014 " + g.from : "");
 $("reason").textContent = "why: " + s.reason;
 $("keys").replaceChildren(...state.labels.map((name,i)=>{
   const b = document.createElement("button");
   b.className = guessed.includes(name) ? "guess" : ""; b.dataset.label = name;
   const k = document.createElement("kbd"); k.textContent = KEYS[i]; b.append(k, name);
   if(state.descriptions[i]){ b.title = state.descriptions[i]; }
   b.onclick = () => choose(name); return b;}));
 $("save").hidden = !state.multi_label;
}
async function save(value){
 const s = state.suggestions[at];
 try{
   const body = state.multi_label ? {text: s.text, labels: value} : {text: s.text, label: value};
   const r = await call("api/label", body);
   state.counts = r.counts; at += 1; show();
 }catch(e){ $("error").textContent = "not saved: " + e.message; }
}
function choose(name){
 if(!state.multi_label){ save(name); return; }
 chosen.has(name) ? chosen.delete(name) : chosen.add(name);
 document.querySelectorAll("#keys button").forEach(b => b.classList.toggle("on", chosen.has(b.dataset.label)));
}
async function more(){
 $("done").hidden = true; $("subtitle").textContent = "suggesting...";
 try{ state = await call("api/more", {}); at = 0; subtitle(); show(); }
 catch(e){ $("error").textContent = e.message; }
}
function subtitle(){
 $("subtitle").textContent = state.pool + " \\u00b7 " + state.labels.length + " labels \\u00b7 guesses: " + state.model;
 $("train").textContent = "tfm-cls train --data " + state.data;
}
document.addEventListener("keydown", ev => {
 if(!state || ev.ctrlKey || ev.metaKey || ev.altKey){ return; }
 if(!$("done").hidden && ev.key === "m"){ more(); return; }
 if($("card").hidden){ return; }
 if(ev.key === "s"){ at += 1; show(); return; }
 if(ev.key === "Enter" && state.multi_label){ save([...chosen]); return; }
 const i = KEYS.indexOf(ev.key);
 if(i >= 0 && i < state.labels.length){ choose(state.labels[i]); }
});
$("skip").onclick = () => { at += 1; show(); };
$("save").onclick = () => save([...chosen]);
$("more").onclick = more;
call("api/state").then(s => { state = s; subtitle(); show(); }).catch(e => { $("error").textContent = e.message; });
</script></body></html>
"""
