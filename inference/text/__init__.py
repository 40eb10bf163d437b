"""Text preparation, shared by every engine: what the web checks and cuts (`preparation`: tags,
languages, sentences and segments; `scripts`: languages by script), what the worker spells out
(`preparation.normalize` with WeTextProcessing; `numbers`: num2words in the languages its grammars
lack), and SSML (`ssml_xml`: parsed with defusedxml and bounded; `ssml_subset`: the elements each
model takes; `ssml`: the walk into words, pauses and marks; `ssml_text`: segments with their styles
and lexicons; `sayas`: say-as in words). No torch: the web process imports it."""
