ceil1 = 2.2342
ceil4 = 4.7254
have_launch = 1
