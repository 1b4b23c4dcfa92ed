"""After a run: results files (store), the HTML report, the gate between two runs, and which ops a
change selects."""
