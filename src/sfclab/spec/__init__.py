"""Lab and experiment files, validated.  Every error names the file, the place in the document
(``links[3].endpoints[1]``) and, where known, the line."""
