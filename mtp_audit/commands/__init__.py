"""What the commands do, below the command line: functions that take parsed options and return
data; ``cli`` parses, calls them, renders what they return and exits (``report.exit_codes``)."""
