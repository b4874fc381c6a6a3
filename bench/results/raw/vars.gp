ceil1 = 1.4715
ceil4 = 2.6192
have_launch = 1
