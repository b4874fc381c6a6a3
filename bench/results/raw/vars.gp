ceil1 = 1.82
ceil4 = 4.3658
have_launch = 1
