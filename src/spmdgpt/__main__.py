from spmdgpt.cli import entry

entry()
