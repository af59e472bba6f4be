"""Automatic batching by phase (see DESIGN.md): ``schedule`` (a pure
function from the recorded arrays to groups)."""
