"""The page at GET /: a text box (and a second one for sentence-pair models), the labels as bars,
the model's info. One HTML string with its style and script inline: no external assets, so it
works offline and behind any proxy; it talks to /info and /predict only."""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>tfm-cls serve</title>
<style>
 body{font:15px/1.4 system-ui,sans-serif;max-width:760px;margin:2em auto;padding:0 1em;color:#1d2330}
 h1{font-size:1.3em;margin:0 0 .2em} .muted{color:#667;font-size:.9em}
 textarea,input{width:100%;box-sizing:border-box;font:inherit;padding:.5em;border:1px solid #bbc;border-radius:6px}
 textarea{height:6em;margin:.4em 0} button{font:inherit;padding:.45em 1.4em;border:0;border-radius:6px;
 background:#2b59c3;color:#fff;cursor:pointer} button:disabled{background:#99a}
 .row{display:grid;grid-template-columns:10em 1fr 5em;gap:.6em;align-items:center;margin:.25em 0}
 .bar{height:1.1em;background:#e6e9f2;border-radius:4px;overflow:hidden} .bar>div{height:100%;background:#2b59c3}
 .row.sel .bar>div{background:#1f9d55} .label{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
 .score{text-align:right;font-variant-numeric:tabular-nums} #error{color:#b00020;white-space:pre-wrap}
 #top{font-size:1.1em;margin:.8em 0 .3em} dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;font-size:.85em}
 dt{color:#667} dd{margin:0;word-break:break-all}
</style></head><body>
<h1 id="title">tfm-cls serve</h1><div class="muted" id="subtitle">loading the model's info...</div>
<div id="keybox" hidden><p class="muted">This server needs an API key.</p>
 <input id="key" type="password" placeholder="API key" autocomplete="off"></div>
<textarea id="text" placeholder="Type a text to classify" autofocus></textarea>
<textarea id="pair" placeholder="The second text of the pair" hidden></textarea>
<button id="go">Classify</button> <span class="muted" id="timing"></span>
<div id="error"></div>
<div id="top" hidden>Top label: <b id="top-label"></b> <span class="muted" id="top-score"></span></div>
<div id="bars"></div>
<h2 class="muted" style="font-size:1em;margin-top:2em">Model</h2><dl id="info"></dl>
<script>
"use strict";
const $ = id => document.getElementById(id);
let info = null;
function headers(){const h={"Content-Type":"application/json"};const k=$("key").value;
 if(k){h["Authorization"]="Bearer "+k;} return h;}
async function loadInfo(){
 const r = await fetch("info",{headers:headers()});
 if(r.status===401){$("keybox").hidden=false;$("subtitle").textContent="enter the API key, then classify";return;}
 info = await r.json();
 $("title").textContent = info.model_id;
 $("subtitle").textContent = info.task.replace("_"," ") + " \\u00b7 " + info.labels.length + " labels" +
   (info.pair ? " \\u00b7 sentence pairs" : "") + " \\u00b7 up to " + info.max_input_length + " tokens";
 $("pair").hidden = !info.pair;
 const shown = {labels: info.labels.join(", "), task: info.task, max_input_length: info.max_input_length,
   model_dtype: info.model_dtype, model_sha: info.model_sha, exported_by: info.exported_by,
   tfm_cls_version: info.tfm_cls_version, long_text: JSON.stringify(info.long_text)};
 $("info").replaceChildren(...Object.entries(shown).flatMap(([k,v])=>{
   const dt=document.createElement("dt");dt.textContent=k;const dd=document.createElement("dd");dd.textContent=v;return [dt,dd];}));
}
async function classify(){
 $("error").textContent=""; $("go").disabled=true;
 try{
  if(!info){await loadInfo(); if(!info) return;}
  const text=$("text").value;
  const inputs = info.pair ? [text, $("pair").value] : text;
  const r = await fetch("predict",{method:"POST",headers:headers(),body:JSON.stringify({inputs, truncate:true})});
  const body = await r.json();
  if(!r.ok){$("error").textContent = r.status + " " + body.error_type + ": " + body.error; return;}
  $("timing").textContent = r.headers.get("x-total-time") + " ms";
  show(body);
 }catch(e){$("error").textContent=String(e);}finally{$("go").disabled=false;}
}
function show(entries){
 const top = entries[0];
 $("top").hidden=false; $("top-label").textContent=top.label; $("top-score").textContent=top.score.toFixed(4);
 const regression = info.task === "regression";
 $("bars").replaceChildren(...entries.map(e=>{
  const row=document.createElement("div"); row.className="row"+(e.selected?" sel":"");
  const l=document.createElement("div"); l.className="label"; l.textContent=e.label; l.title=e.label;
  const b=document.createElement("div"); b.className="bar"; const f=document.createElement("div");
  f.style.width = regression ? "100%" : Math.max(0,Math.min(1,e.score))*100+"%"; b.appendChild(f);
  const s=document.createElement("div"); s.className="score"; s.textContent=e.score.toFixed(4);
  row.append(l,b,s); return row;}));
}
$("go").addEventListener("click", classify);
$("text").addEventListener("keydown", e=>{if(e.key==="Enter"&&(e.ctrlKey||e.metaKey)) classify();});
$("key").addEventListener("change", loadInfo);
loadInfo();
</script></body></html>
"""
