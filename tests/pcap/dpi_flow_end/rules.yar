rule tail_marker { strings: $a = /GOODBYE-MARKER$/ condition: $a }
rule word_at_end { strings: $a = "quit" fullword condition: $a }
