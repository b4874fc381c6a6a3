ceil1 = 1.7728
ceil4 = 0.949
have_launch = 1
