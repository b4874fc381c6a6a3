ceil1 = 1.4215
ceil4 = 2.4211
have_launch = 1
