"""Each benchmark's own tests, one folder per benchmark."""
