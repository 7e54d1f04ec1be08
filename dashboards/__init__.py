"""The dashboard: one self-contained HTML file (or a page served live on 127.0.0.1).

Templates (a base and partials), its stylesheet and script live here as package data.
Charts are drawn by Plotly's plotly.js, taken from the `plotly` package and inlined, so
the file opens offline (from an email attachment, with no CDN). Not responsible for the
numbers (analytics) or for storage.
"""
