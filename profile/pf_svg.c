/*
 * profile/pf_svg.c - an interactive flame graph as one self-contained
 * SVG: the frames are drawn as rectangles (root at the bottom, a frame's
 * width its weight), and a small script adds what flamegraph.pl's graphs
 * have: the frame under the pointer named with its weight and share,
 * click to zoom into a frame (its ancestors stay, faded, at full width;
 * "Reset Zoom" or Escape goes back), and search by regular expression
 * (button, Ctrl-F or "/"), which colours the matching frames and prints
 * the share of the total they cover (nested matches counted once).
 *
 * The drawing needs no script: every rectangle and label is in the file;
 * each <g> carries its position as fractions of the total (data-x,
 * data-w), its depth and its parent, which is all the script needs to lay
 * it out again.  Frames narrower than 0.1 pixel are left out (with what is
 * above them), as flamegraph.pl does.
 */
#include "profile/pf_internal.h"

#include <stdlib.h>
#include <string.h>

#include "vm/common.h"
#include "vm/strbuf.h"

enum { SVG_W = 1200, SVG_PAD = 10, FRAME_H = 16, TOP = 60, BOTTOM = 36, FONT = 12 };
#define MIN_PX 0.1

static void xml_text(StrBuf *sb, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': sb_puts(sb, "&amp;"); break;
        case '<': sb_puts(sb, "&lt;"); break;
        case '>': sb_puts(sb, "&gt;"); break;
        case '"': sb_puts(sb, "&quot;"); break;
        case '\'': sb_puts(sb, "&apos;"); break;
        default: sb_putc(sb, *s); break;
        }
    }
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* A colour by kind (VM frames warm, C frames blue-green, roots grey or
 * purple), varied by the name so neighbours differ, the same name always
 * the same colour. */
static void colour(const PfFrame *f, const char *label, StrBuf *sb)
{
    uint32_t h = name_hash(label);
    unsigned a = h & 0xff, b = (h >> 8) & 0xff;
    unsigned r, g, bl;
    switch (f->type) {
    case PF_F_VM:
        r = 205 + a % 50, g = 60 + b % 170, bl = 10 + a % 45;
        break;
    case PF_F_NATIVE:
        r = 60 + a % 50, g = 160 + b % 60, bl = 170 + a % 60;
        break;
    case PF_F_PROCESS:
        r = 170 + a % 40, g = 140 + b % 30, bl = 210 + a % 40;
        break;
    default:
        r = g = bl = 170 + a % 40;
        break;
    }
    sb_printf(sb, "rgb(%u,%u,%u)", r, g, bl);
}

/* Frames drawn so far, their g element's index (the script's node ids). */
typedef struct Ctx {
    PfTree *t;
    StrBuf *out;
    const char *unit;
    double total, scale_px;
    unsigned height;
    uint32_t next;
} Ctx;

static void draw(Ctx *c, uint32_t node, double x, uint32_t parent_ix)
{
    const PfNode *nd = &c->t->nodes[node];
    double w = (double)nd->total;
    if (w * c->scale_px < MIN_PX)
        return;
    uint32_t me = c->next++;
    const char *label = nd->frame == UINT32_MAX ? "all" : pf_tree_label(c->t, nd->frame);
    double px = SVG_PAD + x * c->scale_px, pw = w * c->scale_px;
    double y = c->height - BOTTOM - (double)(nd->depth + 1) * FRAME_H;
    StrBuf *o = c->out;
    sb_printf(o, "<g id=\"f%u\" data-x=\"%.9g\" data-w=\"%.9g\" data-d=\"%u\" data-p=\"%d\">"
                 "<title>",
              me, x / c->total, w / c->total, nd->depth, me ? (int)parent_ix : -1);
    xml_text(o, label);
    sb_printf(o, " (%llu %s, %.2f%%)</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                 "height=\"%d\" fill=\"",
              (unsigned long long)nd->total, c->unit, 100.0 * w / c->total, px, y, pw,
              FRAME_H - 1);
    if (nd->frame == UINT32_MAX)
        sb_puts(o, "rgb(200,200,200)");
    else
        colour(&c->t->d->frames[nd->frame], label, o);
    sb_printf(o, "\" rx=\"2\" ry=\"2\"/><text x=\"%.1f\" y=\"%.1f\">", px + 3, y + FRAME_H - 5);
    /* The label as it fits (the script redoes it after a zoom). */
    size_t fit = pw > 12 ? (size_t)((pw - 6) / (FONT * 0.59)) : 0, len = strlen(label);
    if (fit >= len) {
        xml_text(o, label);
    } else if (fit > 2) {
        char *cut = vm_strndup(label, fit - 2);
        xml_text(o, cut);
        sb_puts(o, "..");
        free(cut);
    }
    sb_puts(o, "</text></g>\n");
    double kx = x;
    for (uint32_t i = 0; i < nd->nkids; i++) {
        const PfNode *k = &c->t->nodes[nd->kids[i]];
        draw(c, nd->kids[i], kx, me);
        kx += (double)k->total;
    }
}

static const char *const script =
    "<script type=\"text/ecmascript\"><![CDATA[\n"
    "'use strict';\n"
    "var W = 0, PAD = 10, FONTW = 12 * 0.59, zoomed = null, matched = null;\n"
    "var details, matchedText, resetBtn, searchBtn, frames = [];\n"
    "function $(id) { return document.getElementById(id); }\n"
    "function init() {\n"
    "  var svg = document.documentElement;\n"
    "  W = parseFloat(svg.getAttribute('width')) - 2 * PAD;\n"
    "  details = $('details'); matchedText = $('matched');\n"
    "  resetBtn = $('unzoom'); searchBtn = $('search');\n"
    "  var gs = document.querySelectorAll('g[data-x]');\n"
    "  for (var i = 0; i < gs.length; i++) {\n"
    "    var g = gs[i];\n"
    "    var f = { g: g, x: +g.dataset.x, w: +g.dataset.w, d: +g.dataset.d, p: +g.dataset.p,\n"
    "              rect: g.querySelector('rect'), text: g.querySelector('text'),\n"
    "              label: g.querySelector('title').textContent.replace(/ \\([^()]*\\)$/, ''),\n"
    "              title: g.querySelector('title').textContent };\n"
    "    f.fill = f.rect.getAttribute('fill');\n"
    "    frames[+g.id.slice(1)] = f;\n"
    "    g.addEventListener('mouseover', function (f) { return function () {\n"
    "      details.textContent = f.title; }; }(f));\n"
    "    g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
    "    g.addEventListener('click', function (f) { return function () { zoom(f.g); }; }(f));\n"
    "  }\n"
    "  resetBtn.addEventListener('click', unzoom);\n"
    "  searchBtn.addEventListener('click', function () {\n"
    "    if (matched) { clearSearch(); return; }\n"
    "    var term = prompt('Search for (regular expression):', '');\n"
    "    if (term) search(term); });\n"
    "  window.addEventListener('keydown', function (e) {\n"
    "    if ((e.ctrlKey && e.key === 'f') || e.key === '/') {\n"
    "      e.preventDefault(); var term = prompt('Search for (regular expression):', '');\n"
    "      if (term) search(term); }\n"
    "    else if (e.key === 'Escape') { unzoom(); clearSearch(); } });\n"
    "}\n"
    "function fit(f, w) {\n"
    "  var n = Math.floor((w - 6) / FONTW), s = f.label;\n"
    "  f.text.textContent = n >= s.length ? s : n > 2 ? s.slice(0, n - 2) + '..' : '';\n"
    "}\n"
    "function place(f, x, w) {\n"
    "  f.rect.setAttribute('x', (PAD + x).toFixed(1));\n"
    "  f.rect.setAttribute('width', w.toFixed(1));\n"
    "  f.text.setAttribute('x', (PAD + x + 3).toFixed(1)); fit(f, w);\n"
    "}\n"
    "/* Zooms into the frame of g: what it holds spreads over the width,\n"
    " * its ancestors stay at full width, faded, everything else hides. */\n"
    "function zoom(g) {\n"
    "  var z = frames[+g.id.slice(1)], eps = 1e-12;\n"
    "  zoomed = z; resetBtn.style.display = 'inline';\n"
    "  for (var i = 0; i < frames.length; i++) {\n"
    "    var f = frames[i];\n"
    "    if (!f) continue;\n"
    "    var inside = f.x >= z.x - eps && f.x + f.w <= z.x + z.w + eps;\n"
    "    if (inside && f.d >= z.d) {\n"
    "      f.g.style.display = ''; f.g.style.opacity = '';\n"
    "      place(f, (f.x - z.x) / z.w * W, f.w / z.w * W);\n"
    "    } else if (f.d < z.d && f.x <= z.x + eps && f.x + f.w >= z.x + z.w - eps) {\n"
    "      f.g.style.display = ''; f.g.style.opacity = '0.5'; place(f, 0, W);\n"
    "    } else {\n"
    "      f.g.style.display = 'none';\n"
    "    }\n"
    "  }\n"
    "}\n"
    "function unzoom() {\n"
    "  zoomed = null; resetBtn.style.display = 'none';\n"
    "  for (var i = 0; i < frames.length; i++) {\n"
    "    var f = frames[i];\n"
    "    if (!f) continue;\n"
    "    f.g.style.display = ''; f.g.style.opacity = ''; place(f, f.x * W, f.w * W);\n"
    "  }\n"
    "}\n"
    "/* Colours the frames whose name matches; the share they cover counts a\n"
    " * frame inside another match once. */\n"
    "function search(term) {\n"
    "  var re;\n"
    "  try { re = new RegExp(term); } catch (e) { matchedText.textContent = 'bad expression'; return 0; }\n"
    "  clearSearch(); matched = {};\n"
    "  for (var i = 0; i < frames.length; i++)\n"
    "    if (frames[i] && i > 0 && re.test(frames[i].label)) {\n"
    "      matched[i] = true; frames[i].rect.setAttribute('fill', 'rgb(230,0,230)'); }\n"
    "  var share = 0;\n"
    "  for (var k in matched) {\n"
    "    var up = frames[k].p, nested = false;\n"
    "    while (up >= 0) { if (matched[up]) { nested = true; break; } up = frames[up].p; }\n"
    "    if (!nested) share += frames[k].w;\n"
    "  }\n"
    "  matchedText.textContent = 'Matched: ' + (100 * share).toFixed(1) + '%';\n"
    "  searchBtn.textContent = 'Reset Search';\n"
    "  return share;\n"
    "}\n"
    "function clearSearch() {\n"
    "  if (!matched) return;\n"
    "  for (var k in matched) frames[k].rect.setAttribute('fill', frames[k].fill);\n"
    "  matched = null; matchedText.textContent = ' '; searchBtn.textContent = 'Search';\n"
    "}\n"
    "window.addEventListener('load', init);\n"
    "]]></script>\n";

void pf_write_svg(tvm_profile *S, PfTree *t, const char *title, StrBuf *out)
{
    const char *what = S->kind == TVM_PROFILE_CPU   ? "on-CPU"
                       : S->kind == TVM_PROFILE_OFF ? "off-CPU"
                                                    : "allocation";
    unsigned height = TOP + BOTTOM + (t->max_depth + 1) * FRAME_H;
    sb_printf(out,
              "<?xml version=\"1.0\" standalone=\"no\"?>\n"
              "<svg version=\"1.1\" width=\"%d\" height=\"%u\" viewBox=\"0 0 %d %u\" "
              "xmlns=\"http://www.w3.org/2000/svg\">\n"
              "<style type=\"text/css\">\n"
              "text { font-family: Verdana, sans-serif; font-size: %dpx; fill: rgb(0,0,0); }\n"
              "g[data-x] text { pointer-events: none; }\n"
              "g[data-x]:hover rect { stroke: black; stroke-width: 0.5; cursor: pointer; }\n"
              "#title { font-size: 17px; }\n"
              ".button { cursor: pointer; fill: rgb(0,0,160); }\n"
              "</style>\n"
              "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" fill=\"rgb(248,248,240)\"/>\n"
              "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">",
              SVG_W, height, SVG_W, height, FONT, SVG_W, height, SVG_W / 2);
    if (title)
        xml_text(out, title);
    else
        sb_printf(out, "tracevm %s profile", what);
    uint64_t total = t->nodes[0].total;
    sb_printf(out,
              "</text>\n<text x=\"%d\" y=\"44\" text-anchor=\"middle\">%llu %s in all "
              "(click a frame to zoom, Ctrl-F to search)</text>\n"
              "<text id=\"unzoom\" class=\"button\" x=\"%d\" y=\"24\" "
              "style=\"display:none\">Reset Zoom</text>\n"
              "<text id=\"search\" class=\"button\" x=\"%d\" y=\"24\" "
              "text-anchor=\"end\">Search</text>\n"
              "<text id=\"matched\" x=\"%d\" y=\"%u\" text-anchor=\"end\"> </text>\n"
              "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n",
              SVG_W / 2, (unsigned long long)total, pf_unit(S), SVG_PAD, SVG_W - SVG_PAD,
              SVG_W - SVG_PAD, height - 12, SVG_PAD, height - 12);
    if (total > 0) {
        Ctx c = { t, out, pf_unit(S), (double)total, (SVG_W - 2.0 * SVG_PAD) / (double)total,
                  height, 0 };
        draw(&c, 0, 0, 0);
    }
    sb_puts(out, script);
    sb_puts(out, "</svg>\n");
}
